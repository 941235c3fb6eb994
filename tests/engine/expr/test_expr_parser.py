"""Parser behaviour beyond the golden file: node shapes, positions, keyword and literal rules."""

from __future__ import annotations

import pytest

from engine.errors import DrillError, ExpressionSyntaxError
from engine.expr import (
    Call,
    Cast,
    FieldRef,
    IfElse,
    Literal,
    Position,
    field_refs,
    parse_expression,
    parse_field_ref,
    to_string,
)
from engine.types import BIGINT, BIT, FLOAT8, NULL, VARCHAR, DataMode, MinorType


def ref(*path: str | int) -> FieldRef:
    return FieldRef(path)


def lit(value) -> Literal:
    return Literal.of(value)


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("a || b", "or"),
        ("a or b", "or"),
        ("a && b", "and"),
        ("a AND b", "and"),
        ("a == b", "equal"),
        ("a = b", "equal"),
        ("a != b", "not_equal"),
        ("a <> b", "not_equal"),
        ("a < b", "less_than"),
        ("a <= b", "less_than_or_equal"),
        ("a > b", "greater_than"),
        ("a >= b", "greater_than_or_equal"),
        ("a + b", "add"),
        ("a - b", "subtract"),
        ("a * b", "multiply"),
        ("a / b", "divide"),
        ("a % b", "modulo"),
        ("a ^ b", "power"),
    ],
)
def test_binary_operators_are_calls_of_registry_functions(text: str, name: str) -> None:
    assert parse_expression(text) == Call(name, (ref("a"), ref("b")))


@pytest.mark.parametrize(("text", "name"), [("-a", "negate"), ("!a", "not"), ("not a", "not")])
def test_unary_operators(text: str, name: str) -> None:
    assert parse_expression(text) == Call(name, (ref("a"),))


def test_precedence_from_lowest_to_highest() -> None:
    tree = parse_expression("a || b && c == d < e + f * g ^ -h")
    assert tree == Call(
        "or",
        (
            ref("a"),
            Call(
                "and",
                (
                    ref("b"),
                    Call(
                        "equal",
                        (
                            ref("c"),
                            Call(
                                "less_than",
                                (
                                    ref("d"),
                                    Call(
                                        "add",
                                        (
                                            ref("e"),
                                            Call(
                                                "multiply",
                                                (
                                                    ref("f"),
                                                    Call(
                                                        "power",
                                                        (ref("g"), Call("negate", (ref("h"),))),
                                                    ),
                                                ),
                                            ),
                                        ),
                                    ),
                                ),
                            ),
                        ),
                    ),
                ),
            ),
        ),
    )


def test_power_is_right_associative_and_others_left() -> None:
    assert parse_expression("a ^ b ^ c") == Call(
        "power", (ref("a"), Call("power", (ref("b"), ref("c"))))
    )
    assert parse_expression("a - b - c") == Call(
        "subtract", (Call("subtract", (ref("a"), ref("b"))), ref("c"))
    )


def test_comparisons_do_not_chain_but_equalities_do() -> None:
    with pytest.raises(ExpressionSyntaxError) as err:
        parse_expression("1 < x <= 3")
    assert (err.value.line, err.value.column) == (1, 7)
    assert parse_expression("a == b == c") == Call(
        "equal", (Call("equal", (ref("a"), ref("b"))), ref("c"))
    )


def test_numbers_without_a_dot_or_exponent_are_bigint_else_float8() -> None:
    assert parse_expression("1") == Literal(1, BIGINT.with_mode(DataMode.REQUIRED))
    assert parse_expression("1.00") == Literal(1.0, FLOAT8.with_mode(DataMode.REQUIRED))
    assert parse_expression("1e3") == Literal(1000.0, FLOAT8.with_mode(DataMode.REQUIRED))
    assert parse_expression("-7") == Literal(-7, BIGINT.with_mode(DataMode.REQUIRED))


def test_keyword_literals_are_case_insensitive() -> None:
    assert parse_expression("TRUE") == Literal(True, BIT.with_mode(DataMode.REQUIRED))
    assert parse_expression("False") == lit(False)
    assert parse_expression("NuLL") == Literal(None, NULL)


def test_strings_in_either_quote_with_escapes() -> None:
    assert parse_expression("'a\\'b'") == Literal("a'b", VARCHAR.with_mode(DataMode.REQUIRED))
    assert parse_expression('"a\\"b\\n\\u0041"') == lit('a"b\nA')
    assert parse_expression(r"'\d+'") == lit(r"\d+")


def test_field_paths_with_backquotes_and_indexes() -> None:
    assert parse_expression("a.`odd name`[0][1].c") == ref("a", "odd name", 0, 1, "c")
    assert parse_expression("_MAP.ppu") == ref("_MAP", "ppu")
    assert parse_expression("$x") == ref("$x")
    assert parse_expression("`end`") == ref("end")
    assert str(ref("a", "odd name", 0, "end", "b")) == "a.`odd name`[0].`end`.b"


def test_function_names_are_case_insensitive_and_aliases_resolve() -> None:
    assert parse_expression("countDistinct(x)") == Call("count_distinct", (ref("x"),))
    assert parse_expression("COUNT_DISTINCT(x)") == parse_expression("countdistinct(x)")
    assert parse_expression("SUM(x)") == Call("sum", (ref("x"),))
    assert parse_expression("mod(a, 2)") == parse_expression("a % 2")
    assert parse_expression("noSuchFn(x)") == Call("noSuchFn", (ref("x"),))


def test_if_and_case_both_parse_to_ifelse() -> None:
    expected = IfElse(((ref("c"), lit(1)), (ref("d"), lit(2))), lit(3))
    assert parse_expression("if c then 1 elseif d then 2 else 3 end") == expected
    assert parse_expression("case when c then 1 when d then 2 else 3 end") == expected
    assert parse_expression("case when c then 1 end") == IfElse(((ref("c"), lit(1)),), lit(None))


def test_casts_in_both_forms() -> None:
    expected = Cast(ref("x"), parse_expression("cast(x as BIGINT)").type)
    assert expected.type.minor == MinorType.BIGINT
    assert parse_expression("castBIGINT(x)") == expected
    assert parse_expression("cast(x as long)") == expected
    assert parse_expression("castFLOAT8(x)") == parse_expression("cast(x as double)")
    assert parse_expression("castFoo(x)") == Call("castFoo", (ref("x"),))


def test_positions_are_kept_but_not_compared() -> None:
    tree = parse_expression("a +\n  sum(b.c)")
    assert isinstance(tree, Call)
    assert tree.position == Position(2, 1, 3)
    call = tree.args[1]
    assert call.position == Position(6, 2, 3)
    assert call.args[0].position == Position(10, 2, 7)
    assert tree == parse_expression("a+sum(b.c)")


def test_syntax_error_carries_line_column_and_caret() -> None:
    with pytest.raises(ExpressionSyntaxError) as caught:
        parse_expression("a.b > ")
    err = caught.value
    assert isinstance(err, DrillError)
    assert (err.line, err.column, err.expression) == (1, 7, "a.b > ")
    assert str(err) == (
        "expected an operand, found end of expression at line 1, column 7\n  a.b > \n        ^"
    )


def test_unterminated_string_points_at_its_opening_quote() -> None:
    with pytest.raises(ExpressionSyntaxError) as caught:
        parse_expression("x == \n 'abc")
    assert (caught.value.line, caught.value.column) == (2, 2)


def test_field_refs_in_order_with_repeats() -> None:
    tree = parse_expression("if a.b > 1 then sum(c[0]) else a.b end")
    assert field_refs(tree) == [ref("a", "b"), ref("c", 0), ref("a", "b")]
    assert field_refs(parse_expression("1 + 2")) == []


def test_parse_field_ref() -> None:
    assert parse_field_ref("output.`a b`[2]") == ref("output", "a b", 2)
    with pytest.raises(ExpressionSyntaxError, match="expected a field reference"):
        parse_field_ref("a + 1")


def test_expression_str_is_the_printed_form() -> None:
    tree = parse_expression("(a + 1) * 2")
    assert str(tree) == to_string(tree) == "(a + 1) * 2"


def test_field_ref_validates_its_path() -> None:
    with pytest.raises(ValueError, match="starts with a name"):
        FieldRef((0, "a"))
    with pytest.raises(ValueError, match="not negative"):
        FieldRef(("a", -1))


def test_absurd_nesting_is_a_syntax_error_not_a_crash() -> None:
    with pytest.raises(ExpressionSyntaxError, match="nested too deeply"):
        parse_expression("(" * 5000 + "a" + ")" * 5000)


def test_an_expression_over_the_length_limit_is_refused_before_parsing() -> None:
    """A plan is untrusted: a megabyte of expression would take tens of seconds to parse."""
    from engine.expr.parser import MAX_EXPRESSION_CHARS

    text = "x + " * (MAX_EXPRESSION_CHARS // 4) + "1"
    with pytest.raises(ExpressionSyntaxError, match="over the limit of 100,000") as raised:
        parse_expression(text)
    assert raised.value.column == MAX_EXPRESSION_CHARS + 1
    parse_expression("s == '" + "a" * 90_000 + "'")  # a long one within the limit parses


def test_a_long_line_shows_the_part_around_the_fault() -> None:
    with pytest.raises(ExpressionSyntaxError) as raised:
        parse_expression("x + " * 200 + ")")
    _, excerpt, caret = str(raised.value).splitlines()
    assert len(excerpt) < 120 and excerpt.startswith("  ...") and excerpt.endswith(")")
    assert len(caret) == len(excerpt)  # the caret is under the ')'


def test_a_text_is_parsed_once_and_its_errors_every_time() -> None:
    assert parse_expression("a.b + 1 > 2") is parse_expression("a.b + 1 > 2")
    for _ in range(2):
        with pytest.raises(ExpressionSyntaxError, match="line 1, column 7"):
            parse_expression("a < b < c")
